package deviceplugin

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// service is the DevicePlugin gRPC service; it is unexported so that the
// Plugin's API stays what the daemon needs.
type service struct {
	v1beta1.UnimplementedDevicePluginServer
	p *Plugin
}

// GetDevicePluginOptions asks kubelet for nothing extra: no PreStartContainer
// call and no preferred allocation, because ENIs are interchangeable and the
// CNI does the wiring.
func (service) GetDevicePluginOptions(context.Context, *v1beta1.Empty) (*v1beta1.DevicePluginOptions, error) {
	return &v1beta1.DevicePluginOptions{}, nil
}

// ListAndWatch sends the device list at once and again on every SetCount
// change, until kubelet hangs up or the server stops.
func (s service) ListAndWatch(_ *v1beta1.Empty, stream grpc.ServerStreamingServer[v1beta1.ListAndWatchResponse]) error {
	for {
		devs, changed := s.p.snapshot()
		if err := stream.Send(&v1beta1.ListAndWatchResponse{Devices: devs}); err != nil {
			return fmt.Errorf("send %d devices: %w", len(devs), err)
		}
		s.p.log.Debug("sent device list", "count", len(devs))
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// Allocate only confirms the allocation: the device is a claim on the
// daemon's ENI pool, and the CNI moves the ENI into the pod.
func (s service) Allocate(_ context.Context, req *v1beta1.AllocateRequest) (*v1beta1.AllocateResponse, error) {
	resp := &v1beta1.AllocateResponse{
		ContainerResponses: make([]*v1beta1.ContainerAllocateResponse, len(req.GetContainerRequests())),
	}
	for i := range resp.ContainerResponses {
		resp.ContainerResponses[i] = &v1beta1.ContainerAllocateResponse{}
	}
	s.p.log.Debug("allocated", "containers", len(resp.ContainerResponses))
	return resp, nil
}

// PreStartContainer has nothing to prepare; kubelet does not call it since
// the options do not ask for it.
func (service) PreStartContainer(context.Context, *v1beta1.PreStartContainerRequest) (*v1beta1.PreStartContainerResponse, error) {
	return &v1beta1.PreStartContainerResponse{}, nil
}

// GetPreferredAllocation has no preference, ENIs being interchangeable.
func (service) GetPreferredAllocation(context.Context, *v1beta1.PreferredAllocationRequest) (*v1beta1.PreferredAllocationResponse, error) {
	return &v1beta1.PreferredAllocationResponse{}, nil
}
