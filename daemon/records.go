package daemon

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// records serves TerwayRecords: the store's attachments and intents,
// read-only, for the lab's audit, which would otherwise copy the store
// file behind the daemon's back.
type records struct {
	rpc.UnimplementedTerwayRecordsServer
	d *Daemon
}

// ListRecords answers the store's records as of one moment (a
// transaction is seen whole). A store already closed means the daemon is
// stopping: Unavailable, as for a daemon not yet initialised.
func (r *records) ListRecords(context.Context, *rpc.ListRecordsRequest) (*rpc.ListRecordsReply, error) {
	atts, intents, err := r.d.store.Snapshot()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	out := &rpc.ListRecordsReply{}
	for _, a := range atts {
		out.Attachments = append(out.Attachments, attachmentRecord(a))
	}
	for _, in := range intents {
		out.Intents = append(out.Intents, intentRecord(in))
	}
	return out, nil
}

func attachmentRecord(a store.Attachment) *rpc.AttachmentRecord {
	out := &rpc.AttachmentRecord{PodNamespace: a.PodNamespace, PodName: a.PodName, PodUid: a.PodUID,
		ContainerId: a.ContainerID, IfName: a.IfName, IpType: string(a.IPType),
		CreatedAt: timestamp(a.CreatedAt), StickyUntil: timestamp(a.StickyUntil), PodGone: timestamp(a.PodGone)}
	for _, res := range a.Resources {
		out.Resources = append(out.Resources, &rpc.ResourceRecord{Type: string(res.Type), Id: res.ID, EniId: res.ENIID,
			EniMac: res.ENIMAC, Ipv4: res.IPv4, Ipv6: res.IPv6})
	}
	return out
}

func intentRecord(in store.Intent) *rpc.IntentRecord {
	return &rpc.IntentRecord{Key: in.Key, Kind: string(in.Kind), EniId: in.ENIID, VswitchId: in.VSwitchID,
		Count: int64(in.Count), Ips: in.IPs, CreatedAt: timestamp(in.CreatedAt)}
}

// timestamp leaves a zero time unset, as the store's JSON omits it.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
