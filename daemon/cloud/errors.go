package cloud

import (
	"errors"
	"net"
	"net/url"
	"strings"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
)

// API error codes the daemon reacts to (terway-facts.md §2.4).
const (
	CodeIPNotEnough         = "InvalidVSwitchId.IpNotEnough"
	CodeQuotaPrivateIP      = "QuotaExceeded.PrivateIpAddress"
	CodeENIPerInstanceLimit = "EniPerInstanceLimitExceeded"
	CodeSecurityGroupLimit  = "SecurityGroupInstanceLimitExceed"
	CodeIPUnassigned        = "InvalidIp.IpUnassigned"
	CodeENINotFound         = "InvalidEniId.NotFound"
	CodeEcsNotFound         = "InvalidEcsId.NotFound"
	CodeInvalidENIState     = "InvalidOperation.InvalidEniState"
	// CodeInvalidOperation is how the cloud refuses to unassign an address
	// or delete an ENI that an EIP still binds.
	CodeInvalidOperation   = "InvalidOperation"
	CodeIPv4CountExceeded  = "InvalidOperation.Ipv4CountExceeded"
	CodeIPv6CountExceeded  = "InvalidOperation.Ipv6CountExceeded"
	CodeOperationConflict  = "Operation.Conflict"
	CodeIdempotentFailed   = "IdempotentFailed"
	CodeInternalError      = "InternalError"
	CodeServiceUnavailable = "ServiceUnavailable"
	CodeForbiddenRAM       = "Forbidden.RAM"
)

// ErrorCode returns the API error code of err, "" when err is not an API
// answer (transport errors, context errors, our own errors).
func ErrorCode(err error) string {
	var se *sdkerrors.ServerError
	if errors.As(err, &se) {
		return se.ErrorCode()
	}
	return ""
}

// IsThrottling reports whether the cloud refused err for flow control.
func IsThrottling(err error) bool {
	return strings.HasPrefix(ErrorCode(err), "Throttling")
}

// IsNotFound reports whether err says the ENI or instance does not exist.
func IsNotFound(err error) bool {
	switch ErrorCode(err) {
	case CodeENINotFound, CodeEcsNotFound:
		return true
	}
	return false
}

// IsExhausted reports whether err says the vSwitch has no addresses left
// (ECS answers either code).
func IsExhausted(err error) bool {
	switch ErrorCode(err) {
	case CodeIPNotEnough, CodeQuotaPrivateIP:
		return true
	}
	return false
}

// IsRetryable reports whether repeating the same call may succeed:
// throttling, internal errors, conflicts with another operation on the
// same ENI, and transport failures. Every other answer is final.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var se *sdkerrors.ServerError
	if errors.As(err, &se) {
		switch c := se.ErrorCode(); {
		case strings.HasPrefix(c, "Throttling"), c == CodeInternalError, c == CodeServiceUnavailable, c == CodeOperationConflict:
			return true
		}
		return se.HttpStatus() >= 500
	}
	var ce *sdkerrors.ClientError
	if errors.As(err, &ce) {
		return ce.ErrorCode() == "SDK.TimeoutError" || ce.ErrorCode() == "SDK.ServerUnreachable"
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// outcome names how a call ended, for metrics.
func outcome(err error) string {
	switch {
	case err == nil:
		return "Success"
	case ErrorCode(err) != "":
		return ErrorCode(err)
	case IsRetryable(err):
		return "TransportError"
	}
	return "Error"
}
