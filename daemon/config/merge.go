package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Merge applies patch to base as an RFC 7396 JSON Merge Patch and returns the
// merged document. This is Terway's dynamic per-node configuration: a node
// labelled terway-config=<name> takes the eni_conf of ConfigMap <name> as
// patch over the default eni_conf (package daemon/dynconfig reads the label
// and the ConfigMap).
//
// Objects merge recursively; a null in patch deletes that key; anything else
// (strings, numbers, booleans, arrays) replaces the value in base whole. A
// patch that is not an object replaces base entirely. An empty (or blank)
// patch returns base unchanged; an empty base counts as {}. Numbers keep their
// exact text; the output has object keys sorted and no HTML escaping.
func Merge(base, patch []byte) ([]byte, error) {
	if len(bytes.TrimSpace(patch)) == 0 {
		return bytes.Clone(base), nil
	}
	var b any = map[string]any{}
	if len(bytes.TrimSpace(base)) > 0 {
		v, err := decodeAny(base)
		if err != nil {
			return nil, fmt.Errorf("eni_conf merge: base: %w", err)
		}
		b = v
	}
	p, err := decodeAny(patch)
	if err != nil {
		return nil, fmt.Errorf("eni_conf merge: patch: %w", err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(mergePatch(b, p)); err != nil {
		return nil, fmt.Errorf("eni_conf merge: encode: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// mergePatch is RFC 7396 section 2's MergePatch(Target, Patch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// decodeAny decodes one JSON value with numbers kept as json.Number, and
// rejects trailing data. Syntax errors carry their byte offset.
func decodeAny(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("malformed JSON at byte offset %d: %w", se.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("malformed JSON at byte offset %d: unexpected end of input", len(data))
		}
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("malformed JSON: data after the value at byte offset %d", dec.InputOffset())
	}
	return v, nil
}
