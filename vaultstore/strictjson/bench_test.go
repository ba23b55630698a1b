package strictjson

import (
	"fmt"
	"strings"
	"testing"
)

// realisticBody returns a tokenization request of about size bytes (at least
// one token record).
func realisticBody(size int) string {
	var b strings.Builder
	b.WriteString(`{"request_id":"5f0c2a9e-8d1b-4c3e-9a7f-1e2d3c4b5a69","tenant":"acme-payments",` +
		`"settings":{"fingerprint_tokens":true,"retention":30,"format":"preserve_last4"},` +
		`"permissions":["tokenize","detokenize:masked","audit:read"],"tokens":[`)
	for i := 0; i == 0 || b.Len() < size-recordLen; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"kind":"card","value":"4242424242424242","expiry":"12/29","holder":"Jöhn Q. Cardholder %d",`+
			`"metadata":{"source":"checkout-web","ip":"203.0.113.%d","user_agent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36",`+
			`"amount":1299.95,"currency":"EUR","items":[{"sku":"SKU-%05d","qty":2,"price":499.99},{"sku":"SKU-%05d","qty":1,"price":300.0}],`+
			`"flags":{"recurring":false,"three_ds":true,"risk":null},"note":"line \"one\"\nline two \u00e9\u00e8 \ud83d\ude00"},`+
			`"labels":{"env":"prod","team":"payments","region":"eu-west-1","cost_center":"cc-0042","owner":"team-payments@example.com"},`+
			`"billing":{"line1":"Hauptstraße 12","city":"München","postcode":"80331","country":"DE"},"price":12.5}`, i, i%255, i, i+1)
	}
	b.WriteString(`]}`)
	return b.String()
}

// recordLen is the approximate size of one token record of realisticBody.
const recordLen = 680

type benchToken struct {
	Kind     string            `json:"kind"`
	Value    string            `json:"value"`
	Expiry   string            `json:"expiry"`
	Holder   string            `json:"holder"`
	Metadata map[string]any    `json:"metadata"`
	Labels   map[string]string `json:"labels"`
	Price    float64           `json:"price"`
}

type benchRequest struct {
	RequestID   string       `json:"request_id"`
	Tenant      string       `json:"tenant"`
	Settings    settings     `json:"settings"`
	Permissions []string     `json:"permissions"`
	Tokens      []benchToken `json:"tokens"`
}

var benchSizes = []struct {
	name string
	n    int
}{{"1KB", 1 << 10}, {"64KB", 64 << 10}}

func BenchmarkValidate(b *testing.B) {
	for _, size := range benchSizes {
		body := []byte(realisticBody(size.n))
		b.Run(fmt.Sprintf("%s(%dB)", size.name, len(body)), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Validate(body, DefaultLimits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, size := range benchSizes {
		body := []byte(realisticBody(size.n))
		b.Run(fmt.Sprintf("%s(%dB)", size.name, len(body)), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var r benchRequest
				if err := Decode(body, &r, DefaultLimits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeValue(b *testing.B) {
	body := []byte(realisticBody(1 << 10))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeValue(body, DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateWideObject measures a 64 KB object of 700 short string
// members, the shape of a large payment request.
func BenchmarkValidateWideObject(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"amount":1000`)
	for m := 0; m < 700; m++ {
		fmt.Fprintf(&sb, `,"f%04d":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"`, m)
	}
	sb.WriteString(`}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Validate(body, DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}
