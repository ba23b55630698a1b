package vaultstore

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkAuditedParallel runs audited operations of one tenant from
// many goroutines: every one of them moves the tenant's audit chain head,
// so this measures what the chain's serialization costs. Reads are
// group-committed in batches; creates each record in their own
// transaction and conflict on the head.
func BenchmarkAuditedParallel(b *testing.B) {
	for _, op := range []string{"GetTokenRevealed", "CreateCardToken"} {
		b.Run(op, func(b *testing.B) {
			w := newTokenBenchWorld(b, true)
			tok := w.mustCreate("admin", TokenInput{Type: "card", Data: benchCard(7)})
			req := w.req("admin")
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if op == "CreateCardToken" {
						_, err = w.s.CreateToken(w.ctx, req, TokenInput{Type: "card", Data: benchCard(int(n.Add(1)))})
					} else {
						_, err = w.s.GetToken(w.ctx, req, tok.ID)
					}
					if err != nil {
						b.Error(fmt.Errorf("%s: %w", op, err))
						return
					}
				}
			})
		})
	}
}
