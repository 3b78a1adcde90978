package fakecloud

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// Limits of the free-form ENI parameters, from the CreateNetworkInterface
// and ModifyNetworkInterfaceAttribute references (fakecloud/README.md
// cites them). Without them any value was stored, in state and journal:
// a 200 KB name went into every Describe answer and journal record.
const (
	minENINameLen, maxENINameLen   = 2, 128
	minENIDescLen, maxENIDescLen   = 2, 256
	minQueueNumber, maxQueueNumber = 1, 2048
)

// Error codes of the refusals below: ECS's CreateNetworkInterface error
// table lists the generic InvalidParameter for a bad name and
// InvalidParameter.InvalidEniQueueNumber (403) for the queue count; ECS
// answers InvalidDescription.Malformed for a Description outside 2–256
// characters in every action that takes one.
const (
	CodeDescriptionMalformed = "InvalidDescription.Malformed"
	CodeInvalidQueueNumber   = "InvalidParameter.InvalidEniQueueNumber"
)

// checkENIText validates NetworkInterfaceName and Description when sent
// non-empty (the SDKs send neither unless set; empty means unset).
func checkENIText(p wire.Params) error {
	if name := p.String("NetworkInterfaceName"); name != "" && !validENIName(name) {
		return apiErr(400, CodeInvalidParameter,
			"The specified parameter \"NetworkInterfaceName\" is not valid: %d characters starting %q; it must be %d to %d characters, start with a letter, not start with http:// or https://, and contain only letters, digits, colons, underscores, periods and hyphens.",
			utf8.RuneCountInString(name), preview(name), minENINameLen, maxENINameLen)
	}
	if d := p.String("Description"); d != "" && !validENIDescription(d) {
		return apiErr(400, CodeDescriptionMalformed,
			"The specified parameter \"Description\" is not valid: %d characters starting %q; it must be %d to %d characters and not start with http:// or https://.",
			utf8.RuneCountInString(d), preview(d), minENIDescLen, maxENIDescLen)
	}
	return nil
}

// validENIName applies ECS's name rule. Letters include Chinese ones, as
// the reference allows; periods are accepted as the English reference of
// CreateNetworkInterface lists them.
func validENIName(s string) bool {
	if !utf8.ValidString(s) || webPrefix(s) {
		return false
	}
	n := utf8.RuneCountInString(s)
	if n < minENINameLen || n > maxENINameLen {
		return false
	}
	for i, r := range s {
		switch {
		case unicode.IsLetter(r):
		case i == 0:
			return false
		case unicode.IsDigit(r), r == ':', r == '_', r == '.', r == '-':
		default:
			return false
		}
	}
	return true
}

func validENIDescription(s string) bool {
	n := utf8.RuneCountInString(s)
	return utf8.ValidString(s) && !webPrefix(s) && n >= minENIDescLen && n <= maxENIDescLen
}

func webPrefix(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

// preview is the start of a refused value for an error message, which
// must not echo a 200 KB parameter back.
func preview(s string) string {
	const max = 32
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// parseQueueNumber reads QueueNumber: absent (or empty) is 0, "the
// instance type's default"; otherwise it must be 1..2048.
func parseQueueNumber(p wire.Params) (int, error) {
	n, err := p.Int("QueueNumber", 0)
	if err != nil {
		return 0, err
	}
	if p.String("QueueNumber") != "" && (n < minQueueNumber || n > maxQueueNumber) {
		return 0, apiErr(403, CodeInvalidQueueNumber, "The specified QueueNumber %d is not valid: it must be %d to %d.", n, minQueueNumber, maxQueueNumber)
	}
	return n, nil
}

// maxResourceGroupIDLen bounds ResourceGroupId, which fakecloud stores
// without modelling resource groups: real IDs are "rg-" and a dozen or so
// lower-case characters.
const maxResourceGroupIDLen = 64

// checkResourceGroup refuses a ResourceGroupId that cannot name a
// resource group, with the code CreateNetworkInterface's error table gives
// for an unknown one (404 InvalidResourceGroup.NotFound), so that no
// oversized value reaches state and journal.
func checkResourceGroup(p wire.Params) error {
	id := p.String("ResourceGroupId")
	ok := len(id) <= maxResourceGroupIDLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if !ok {
		return apiErr(404, "InvalidResourceGroup.NotFound", "The ResourceGroup provided does not exist in our records: %q.", preview(id))
	}
	return nil
}
