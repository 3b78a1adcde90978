package fakecloud

import "github.com/terway-sim/terway/fakecloud/wire"

// Error codes clients switch on. Statuses follow the ECS and VPC API
// references (see fakecloud/README.md for the table and its sources).
const (
	CodeENINotFound            = "InvalidEniId.NotFound"
	CodeEcsNotFound            = "InvalidEcsId.NotFound"
	CodeInstanceNotFound       = "InvalidInstanceId.NotFound"
	CodeVSwitchNotFound        = "InvalidVSwitchId.NotFound"
	CodeSecurityGroupNotFound  = "InvalidSecurityGroupId.NotFound"
	CodeInvalidENIState        = "InvalidOperation.InvalidEniState"
	CodeInvalidEcsState        = "InvalidOperation.InvalidEcsState"
	CodeInvalidENIType         = "InvalidOperation.InvalidEniType"
	CodeDetachPrimary          = "InvalidOperation.DetachPrimaryEniNotAllowed"
	CodeENIPerInstanceLimit    = "EniPerInstanceLimitExceeded"
	CodeMaxENICount            = "MaxEniCountExceeded"
	CodeZoneMismatch           = "InvalidOperation.AvailabilityZoneMismatch"
	CodeVpcMismatch            = "InvalidOperation.VpcMismatch"
	CodeIPNotEnough            = "InvalidVSwitchId.IpNotEnough"
	CodeQuotaPrivateIP         = "QuotaExceeded.PrivateIpAddress"
	CodeIPInvalid              = "InvalidVSwitchId.IpInvalid"
	CodeIPAssigned             = "InvalidIp.IpAssigned"
	CodeIPUnassigned           = "InvalidIp.IpUnassigned"
	CodeIPDuplicated           = "InvalidPrivateIpAddress.Duplicated"
	CodeIPv4CountExceeded      = "InvalidOperation.Ipv4CountExceeded"
	CodeIPv6CountExceeded      = "InvalidOperation.Ipv6CountExceeded"
	CodeMaxENIPrivateIPs       = "MaxEniPrivateIpsCountExceeded"
	CodeIPv6NotTurnOn          = "InvalidVSwitch.Ipv6NotTurnOn"
	CodeOperationConflict      = "Operation.Conflict"
	CodeIdempotentFailed       = "IdempotentFailed"
	CodeThrottling             = "Throttling.User"
	CodeInternalError          = "InternalError"
	CodeServiceUnavailable     = "ServiceUnavailable"
	CodeMissingParameter       = "MissingParameter"
	CodeInvalidParameter       = "InvalidParameter"
	CodeInvalidAPI             = "InvalidApi.NotFound"
	CodeAccessKeyNotFound      = "InvalidAccessKeyId.NotFound"
	CodeSignatureMismatch      = "SignatureDoesNotMatch"
	CodeNonceUsed              = "SignatureNonceUsed"
	CodeTimestampExpired       = "InvalidTimeStamp.Expired"
	CodeTokenExpired           = "InvalidSecurityToken.Expired"
	CodeTokenMalformed         = "InvalidSecurityToken.Malformed"
	CodeTokenMismatch          = "InvalidSecurityToken.MismatchWithAccessKey"
	CodeRouteTableNotFound     = "InvalidRouteTableId.NotFound"
	CodeRouteTableNotFoundList = "InvalidRouteTable.NotFound"
	CodeCIDRDuplicate          = "InvalidCIDRBlock.Duplicate"
	CodeCIDRMalformed          = "InvalidCidrBlock.Malformed"
	CodeNextHopNotFound        = "InvalidNextHopId.NotFound"
	CodeNextHopType            = "InvalidNextHopType"
	CodeRouteEntryNotFound     = "InvalidRouteEntry.NotFound"
	CodeRouteEntryStatus       = "IncorrectRouteEntryStatus"
	CodeRouteSystem            = "OperationDenied"
	CodeAllocationNotFound     = "InvalidAllocationId.NotFound"
	CodeIncorrectEIPStatus     = "IncorrectEipStatus"
	CodeAssociationDuplicated  = "InvalidAssociation.Duplicated"
	CodeEIPQuota               = "QuotaExceeded.Eip"
	CodeEIPInstanceType        = "InvalidInstanceType.ValueNotSupported"
	CodeNicOrVMNotFound        = "InvalidNicOrVm.NotFound"
	CodeResourceNotFound       = "InvalidResourceId.NotFound"
	CodeResourceTypeNotFound   = "InvalidResourceType.NotFound"
	CodeTagQuota               = "OperationDenied.QuotaExceed"
	CodeTagKeyMalformed        = "InvalidTagKey.Malformed"
	CodeTagKeyDuplicate        = "Duplicate.TagKey"
	CodeNextTokenInvalid       = "IllegalParam.NextToken"
	// CodeInvalidOperation refuses what the API references leave open
	// (fakecloud/README.md lists each case).
	CodeInvalidOperation         = "InvalidOperation"
	CodeIPNotInCbwp              = "OperationUnsupported.IpNotInCbwp"
	CodeBandwidthPackageNotFound = "InvalidBandwidthPackageId.NotFound"
)

// The other throttling codes the service answers (aliyun-wire §3.4): the
// ECS "API throttling" page names Throttling, the gateway also answers
// Throttling.Api; CodeThrottling (Throttling.User) is the default.
const (
	CodeThrottlingPlain = "Throttling"
	CodeThrottlingAPI   = "Throttling.Api"
)

func isThrottleCode(code string) bool {
	switch code {
	case CodeThrottlingPlain, CodeThrottling, CodeThrottlingAPI:
		return true
	}
	return false
}

func apiErr(status int, code, format string, args ...any) *wire.Error {
	return wire.Errorf(status, code, format, args...)
}

func errENINotFound(id string) error {
	return apiErr(404, CodeENINotFound, "The specified EniId %q is not found.", id)
}

func errEcsNotFound(id string) error {
	return apiErr(404, CodeEcsNotFound, "The specified instance %q does not exist.", id)
}

func errENIState(id, want, got string) error {
	return apiErr(400, CodeInvalidENIState, "The operation is not allowed in the current ENI state. Expecting status is %q while current status is %q (%s).", want, got, id)
}

func errMissing(name string) error {
	return apiErr(400, CodeMissingParameter, "The input parameter %q that is mandatory for processing this request is not supplied.", name)
}

func errInvalid(name, value string) error {
	return apiErr(400, CodeInvalidParameter, "The specified parameter %q is not valid: %q.", name, value)
}

// required returns a business parameter or MissingParameter.
func required(p wire.Params, name string) (string, error) {
	v := p.String(name)
	if v == "" {
		return "", errMissing(name)
	}
	return v, nil
}

// ErrorCode extracts the API code of an error returned by the Go API.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	return wire.AsError(err).Code
}
