package fakecloud

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendENI appends the JSON of e as encoding/json would decode it back
// into an eni. ENIs change on almost every API call and are journalled
// each time; writing them by hand instead of through reflection is what
// keeps the journal off the critical path (see BenchmarkHandler*).
// TestAppendENIRoundTrip guards that every field is written.
func appendENI(b []byte, e *eni) []byte {
	b = append(b, '{')
	b = appendStrField(b, "id", e.ID, true)
	b = appendStrField(b, "name", e.Name, false)
	b = appendStrField(b, "description", e.Description, false)
	b = appendStrField(b, "type", e.Type, false)
	b = appendStrField(b, "status", e.Status, false)
	b = appendStrField(b, "vswitchId", e.VSwitchID, false)
	b = appendStrField(b, "vpcId", e.VPCID, false)
	b = appendStrField(b, "zoneId", e.ZoneID, false)
	b = appendStrField(b, "mac", e.MAC, false)
	if len(e.SecurityGroups) > 0 {
		b = append(b, `,"securityGroups":[`...)
		for i, g := range e.SecurityGroups {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, g)
		}
		b = append(b, ']')
	}
	if e.PrimaryIP.IsValid() {
		b = append(b, `,"primaryIp":"`...)
		b = e.PrimaryIP.AppendTo(b)
		b = append(b, '"')
	}
	b = appendAddrRecs(b, "ipv4", e.IPv4)
	b = appendAddrRecs(b, "ipv6", e.IPv6)
	if len(e.Tags) > 0 {
		b = append(b, `,"tags":[`...)
		for i, t := range e.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = appendJSONString(b, t.Key)
			b = append(b, `,"value":`...)
			b = appendJSONString(b, t.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendStrField(b, "instanceId", e.InstanceID, false)
	b = appendIntField(b, "deviceIndex", e.DeviceIndex)
	b = appendBoolField(b, "deleteOnRelease", e.DeleteOnRelease)
	b = appendBoolField(b, "sourceDestCheck", e.SourceDestCheck)
	b = appendStrField(b, "resourceGroupId", e.ResourceGroupID, false)
	b = appendStrField(b, "trafficMode", e.TrafficMode, false)
	b = appendIntField(b, "queueNumber", e.QueueNumber)
	b = appendTimeField(b, "createdAt", e.CreatedAt)
	b = appendTimeField(b, "visibleAt", e.VisibleAt)
	b = appendTimeField(b, "attachedAt", e.AttachedAt)
	b = appendTimeField(b, "due", e.Due)
	b = appendStrField(b, "staleInstanceId", e.StaleInstanceID, false)
	b = appendTimeField(b, "staleUntil", e.StaleUntil)
	b = appendAddrRecs(b, "gone4", e.Gone4)
	b = appendAddrRecs(b, "gone6", e.Gone6)
	return append(b, '}')
}

func appendStrField(b []byte, name, v string, first bool) []byte {
	if v == "" && !first {
		return b
	}
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendJSONString(b, v)
}

func appendIntField(b []byte, name string, v int) []byte {
	if v == 0 {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, int64(v), 10)
}

func appendBoolField(b []byte, name string, v bool) []byte {
	if !v {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	return append(b, `":true`...)
}

func appendTimeField(b []byte, name string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func appendAddrRecs(b []byte, name string, recs []addrRec) []byte {
	if len(recs) == 0 {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":[`...)
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"addr":"`...)
		b = r.Addr.AppendTo(b)
		b = append(b, `","at":"`...)
		b = r.At.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"}`...)
	}
	return append(b, ']')
}

// appendJSONString writes s as a JSON string; plain ASCII (what IDs, MACs
// and most names are) is copied, anything else goes through
// encoding/json for exact escaping.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
