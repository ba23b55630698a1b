package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/url"
	"strings"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// bodyKind is how a proxied request body is detokenized.
type bodyKind int

const (
	// bodyText: the whole body is one text (text/*, or no content type).
	bodyText bodyKind = iota
	// bodyJSON: string values of a JSON document (application/json,
	// */*+json); everything else stays byte for byte.
	bodyJSON
	// bodyForm: values of application/x-www-form-urlencoded pairs.
	bodyForm
	// bodyOpaque: never read; streams to the destination as sent.
	bodyOpaque
)

// bodyKindOf classifies a Content-Type.
func bodyKindOf(contentType string) bodyKind {
	if contentType == "" {
		return bodyText
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return bodyOpaque
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return bodyJSON
	case mt == "application/x-www-form-urlencoded":
		return bodyForm
	case strings.HasPrefix(mt, "text/"):
		return bodyText
	}
	return bodyOpaque
}

// detokenizeForm detokenizes the values of a form body; names, order and
// the encoding of untouched pairs stay as sent. A value that is one
// expression of an object becomes that object's JSON.
func detokenizeForm(ctx context.Context, s *vaultstore.Store, req vaultstore.TokenRequest, opts vaultstore.DetokenizeOptions, body []byte) ([]byte, error) {
	pairs := strings.Split(string(body), "&")
	var fields []vaultstore.DetokenizeField
	var at []int // pair index of each field
	for i, p := range pairs {
		name, value, _ := strings.Cut(p, "=")
		v, err := url.QueryUnescape(value)
		if err != nil || !strings.Contains(v, "{{") {
			continue
		}
		n, err := url.QueryUnescape(name)
		if err != nil {
			n = "body"
		}
		fields = append(fields, vaultstore.DetokenizeField{Path: n, Text: v})
		at = append(at, i)
	}
	if len(fields) == 0 {
		return body, nil
	}
	values, _, err := s.DetokenizeFields(ctx, req, opts, fields)
	if err != nil {
		return nil, err
	}
	for j, v := range values {
		text, ok := v.(string)
		if !ok {
			b, err := marshalCompact(v)
			if err != nil {
				return nil, err
			}
			text = string(b)
		}
		name, _, _ := strings.Cut(pairs[at[j]], "=")
		pairs[at[j]] = name + "=" + url.QueryEscape(text)
	}
	return []byte(strings.Join(pairs, "&")), nil
}

// marshalCompact encodes v as compact JSON without HTML escaping.
func marshalCompact(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
