package vaultstore

import "github.com/tokenvault/tokenvault/vaultstore/kv/badgerkv"

// Kinds of Event.
const (
	EventTokenCreated = "token_created"
	EventTokenDeleted = "token_deleted"
	EventTokenExpired = "token_expired"
	EventDetokenized  = "detokenized"
)

// Event is something the store did that operators count (metrics). It
// carries no tenant data: a kind, a token type and a count.
type Event struct {
	Kind      string
	TokenType string
	Count     int
}

// emit reports an event to Options.Events, after the change committed.
func (s *Store) emit(kind, tokenType string, count int) {
	if s.events != nil && count > 0 {
		s.events(Event{Kind: kind, TokenType: tokenType, Count: count})
	}
}

// Stats are the storage engine's figures.
type Stats struct {
	LSMBytes  int64 // the key index
	VLogBytes int64 // the value log
	GCRuns    int64 // value-log garbage collection passes that rewrote a file
	// BlockCacheHeld is the bytes of table blocks the engine's block cache
	// refers to now, bounded by Options.BlockCacheBytes.
	BlockCacheHeld int64
}

// Stats returns the storage engine's figures.
func (s *Store) Stats() Stats {
	if st, ok := engineAs[interface{ Stats() badgerkv.Stats }](s.kv); ok {
		bs := st.Stats()
		return Stats{LSMBytes: bs.LSMBytes, VLogBytes: bs.VLogBytes, GCRuns: bs.GCRuns, BlockCacheHeld: bs.BlockCacheHeld}
	}
	return Stats{}
}
