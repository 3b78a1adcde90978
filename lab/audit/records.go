package audit

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/terway-sim/terway/rpc"
)

// attachment is what a daemon handed out to one pod, as its records
// answer it: the audit's own reading of the wire, not the daemon's store
// types.
type attachment struct {
	PodNamespace, PodName, PodUID string
	// IfName is the pod's interface; empty means eth0.
	IfName    string
	IPType    string
	Resources []resource
	// StickyUntil is when a released sticky pod's reservation ends; zero
	// when not sticky. PodGone is when the daemon saw the pod gone.
	StickyUntil, PodGone time.Time
}

// Key is the attachment's pod, "namespace/name".
func (a attachment) Key() string { return a.PodNamespace + "/" + a.PodName }

// resource is one network resource of an attachment.
type resource struct {
	Type, ID, ENIID, ENIMAC, IPv4, IPv6 string
}

// intent is a cloud operation the daemon has in flight.
type intent struct {
	Key, Kind, ENIID string
}

// The daemon's names (Terway's) for what the checks tell apart
// (rpc/records.proto).
const (
	ipTypeENIMultiIP = "ENIMultiIP"
	ipTypeVPCIP      = "VPCIP"
	ipTypeVPCENI     = "VPCENI"
	resourceENI      = "eni"
	resourceENIIP    = "eniIp"
	resourceVPCIP    = "vpcIp"
	intentCreateENI  = "CreateENI"
)

// storeView is what one daemon's store records.
type storeView struct {
	atts    []attachment
	intents []intent
}

// daemonTimeout bounds one call to a daemon.
const daemonTimeout = 5 * time.Second

// dialDaemon makes the client of the daemon on socket (it connects on
// the first call).
func dialDaemon(socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial the daemon on %s: %w", socket, err)
	}
	return conn, nil
}

// daemonError says what a failed call to the daemon on socket means: an
// Unavailable daemon is not running (killed, stopped) or not serving yet.
func daemonError(what, socket string, err error) error {
	if status.Code(err) == codes.Unavailable {
		return fmt.Errorf("%s: the daemon on %s is unreachable (not running, or not initialised yet): %w", what, socket, err)
	}
	return fmt.Errorf("%s: the daemon on %s: %w", what, socket, err)
}

// readRecords asks the daemon on conn for its store's records
// (TerwayRecords.ListRecords: read-only, as of one moment).
func readRecords(ctx context.Context, conn *grpc.ClientConn, socket string) (*storeView, error) {
	ctx, cancel := context.WithTimeout(ctx, daemonTimeout)
	defer cancel()
	reply, err := rpc.NewTerwayRecordsClient(conn).ListRecords(ctx, &rpc.ListRecordsRequest{})
	if err != nil {
		return nil, daemonError("records", socket, err)
	}
	v := &storeView{}
	for _, a := range reply.GetAttachments() {
		v.atts = append(v.atts, attachmentOf(a))
	}
	for _, in := range reply.GetIntents() {
		v.intents = append(v.intents, intent{Key: in.GetKey(), Kind: in.GetKind(), ENIID: in.GetEniId()})
	}
	return v, nil
}

func attachmentOf(a *rpc.AttachmentRecord) attachment {
	out := attachment{PodNamespace: a.GetPodNamespace(), PodName: a.GetPodName(), PodUID: a.GetPodUid(),
		IfName: a.GetIfName(), IPType: a.GetIpType(), StickyUntil: timeOf(a.GetStickyUntil()), PodGone: timeOf(a.GetPodGone())}
	for _, r := range a.GetResources() {
		out.Resources = append(out.Resources, resource{Type: r.GetType(), ID: r.GetId(), ENIID: r.GetEniId(),
			ENIMAC: r.GetEniMac(), IPv4: r.GetIpv4(), IPv6: r.GetIpv6()})
	}
	return out
}

// timeOf is the zero time for an unset timestamp.
func timeOf(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}
