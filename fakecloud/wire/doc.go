// Package wire implements the server side of Alibaba Cloud's RPC-style
// OpenAPI wire format as the ECS (2014-05-26) and VPC (2016-04-28) products
// speak it: parameter decoding (query and form body, Name.N lists,
// Tag.N.Key structs), request authentication with both signature schemes
// the Go SDKs use (HMAC-SHA1 "v1" query signing and ACS3-HMAC-SHA256 header
// signing), and the JSON error envelope clients decode.
//
// The package knows nothing about ENIs or instances; fakecloud builds its
// actions on top of it.
package wire
