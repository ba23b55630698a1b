package bounded

import (
	"fmt"
	"sync"
	"testing"
)

func TestMapStaysBounded(t *testing.T) {
	for _, tc := range []struct{ max, puts, want int }{
		{3, 2, 2},
		{3, 10, 3},
		{0, 5, 1}, // at least one entry
	} {
		m := New[int](tc.max)
		for i := range tc.puts {
			m.Put(fmt.Sprint(i), i)
		}
		if m.Len() != tc.want {
			t.Errorf("max %d, %d puts: %d entries, want %d", tc.max, tc.puts, m.Len(), tc.want)
		}
		last := fmt.Sprint(tc.puts - 1)
		if v, ok := m.Get(last); !ok || v != tc.puts-1 {
			t.Errorf("max %d: the last put is not there: %v, %v", tc.max, v, ok)
		}
	}
}

func TestMapReplacesWithoutEvicting(t *testing.T) {
	m := New[string](2)
	m.Put("a", "1")
	m.Put("b", "2")
	m.Put("a", "3")
	if a, _ := m.Get("a"); a != "3" || m.Len() != 2 {
		t.Errorf("a = %q, len %d", a, m.Len())
	}
	if _, ok := m.Get("b"); !ok {
		t.Error("replacing a dropped b")
	}
}

func TestMapConcurrentUse(t *testing.T) {
	m := New[int](50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := fmt.Sprint(g*1000 + i)
				m.Put(k, i)
				m.Get(k)
			}
		})
	}
	wg.Wait()
	if m.Len() > 50 {
		t.Errorf("%d entries, want at most 50", m.Len())
	}
}
