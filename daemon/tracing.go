package daemon

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/rpc"
)

// tracing serves terway-cli: the daemon's configuration and state, and the
// pod ↔ store ↔ pool mapping.
type tracing struct {
	rpc.UnimplementedTerwayTracingServer
	d *Daemon
}

const (
	traceService = "network_service"
	tracePool    = "resource_pool"
)

func (t *tracing) GetResourceTypes(context.Context, *rpc.Placeholder) (*rpc.ResourcesTypesReply, error) {
	return &rpc.ResourcesTypesReply{TypeNames: []string{traceService, tracePool}}, nil
}

func (t *tracing) GetResources(_ context.Context, r *rpc.ResourceTypeRequest) (*rpc.ResourcesNamesReply, error) {
	switch r.Name {
	case traceService, tracePool:
		return &rpc.ResourcesNamesReply{ResourceNames: []string{"default"}}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no resource type %q", r.Name)
}

func kv(pairs ...string) []*rpc.MapKeyValueEntry {
	var out []*rpc.MapKeyValueEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &rpc.MapKeyValueEntry{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

func (t *tracing) GetResourceConfig(_ context.Context, r *rpc.ResourceTypeNameRequest) (*rpc.ResourceConfigReply, error) {
	d := t.d
	switch r.Type {
	case traceService:
		return &rpc.ResourceConfigReply{Config: kv("name", "default", "daemon_mode", string(d.mode), "node", d.opts.NodeName,
			"instance_id", d.node.Instance.ID, "instance_type", d.limits.InstanceType, "socket", d.cfg.SocketPath,
			"store", d.cfg.StorePath)}, nil
	case tracePool:
		return &rpc.ResourceConfigReply{Config: kv("name", "default", "capacity", strconv.Itoa(d.capacity),
			"max_idle", strconv.Itoa(d.cfg.MaxPoolSize), "min_idle", strconv.Itoa(d.cfg.MinPoolSize))}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no resource type %q", r.Type)
}

func (t *tracing) GetResourceTrace(_ context.Context, r *rpc.ResourceTypeNameRequest) (*rpc.ResourceTraceReply, error) {
	d := t.d
	switch r.Type {
	case traceService:
		d.mu.Lock()
		n := len(d.pending)
		d.mu.Unlock()
		out := kv("pending_pods_count", strconv.Itoa(n), "gc_rounds", strconv.FormatInt(d.gcRounds.Load(), 10))
		atts, err := d.store.List()
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		for _, a := range atts {
			for _, res := range a.Resources {
				out = append(out, &rpc.MapKeyValueEntry{Key: "pods/" + a.Key() + "/resources", Value: res.ID})
			}
		}
		return &rpc.ResourceTraceReply{Trace: out}, nil
	case tracePool:
		st := d.pool.Stats()
		out := kv("enis", strconv.Itoa(st.ENIs), "total", strconv.Itoa(st.Total),
			"idle", strconv.Itoa(st.Idle), "inuse", strconv.Itoa(st.InUse), "reserved", strconv.Itoa(st.Reserved),
			"inflight", strconv.Itoa(st.Inflight), "waiting", strconv.Itoa(st.Waiting), "pending", strconv.FormatBool(st.Pending))
		for _, a := range d.pool.Addresses() {
			out = append(out, &rpc.MapKeyValueEntry{Key: "ip/" + a.IP.IPv4.String(), Value: a.IP.ENIID + " " + a.State + " " + a.Owner})
		}
		return &rpc.ResourceTraceReply{Trace: out}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no resource type %q", r.Type)
}

// GetResourceMapping serves the three-way mapping (see Daemon.Mapping).
func (t *tracing) GetResourceMapping(ctx context.Context, _ *rpc.Placeholder) (*rpc.PodResourceMappingReply, error) {
	out, err := t.d.Mapping(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &rpc.PodResourceMappingReply{Info: out}, nil
}

func (t *tracing) ResourceExecute(r *rpc.ResourceExecuteRequest, s rpc.TerwayTracing_ResourceExecuteServer) error {
	return status.Error(codes.Unimplemented, fmt.Sprintf("no command %q for %s/%s", r.Command, r.Type, r.Name))
}
