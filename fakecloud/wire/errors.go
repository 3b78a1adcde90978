package wire

import (
	"errors"
	"fmt"
)

// Error is an API error as the gateway reports it: an HTTP status and a
// stable code that clients switch on, plus a human message.
type Error struct {
	Status  int
	Code    string
	Message string
}

// Errorf builds an Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// AsError returns err as an *Error, wrapping anything else as the
// InternalError the real gateway answers for unexpected failures.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: 500, Code: "InternalError", Message: "The request processing has failed due to some unknown error."}
}

// ErrorBody is the JSON envelope of every non-2xx answer. The SDKs read
// these keys by name (case-sensitive).
type ErrorBody struct {
	RequestID string `json:"RequestId"`
	HostID    string `json:"HostId"`
	Code      string `json:"Code"`
	Message   string `json:"Message"`
	Recommend string `json:"Recommend"`
}

// NewErrorBody fills the envelope for e; product is "Ecs" or "Vpc" and
// host the product's endpoint host, as the real gateway reports them.
func NewErrorBody(e *Error, requestID, host, product string) ErrorBody {
	return ErrorBody{
		RequestID: requestID,
		HostID:    host,
		Code:      e.Code,
		Message:   e.Message,
		Recommend: fmt.Sprintf("https://api.aliyun.com/troubleshoot?q=%s&product=%s&requestId=%s", e.Code, product, requestID),
	}
}
