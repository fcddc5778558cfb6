package packread

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestBaseCacheBoundsManySmallEntries: entries of a few bytes each are
// charged their bookkeeping, so a budget holds at most budget/entryCost of
// them, not every blob of a tree of many small files.
func TestBaseCacheBoundsManySmallEntries(t *testing.T) {
	const budget = 1 << 20
	c := newBaseCache(budget)
	p := &pack{}
	for off := int64(0); off < 20_000; off++ {
		c.put(p, off, plumbing.BlobObject, []byte("tiny"))
	}
	if n, most := len(c.byKey), budget/(entryCost+4); n > most {
		t.Errorf("the cache holds %d entries of 4 bytes with a budget of %d bytes; at most %d fit", n, budget, most)
	}
	if c.used > budget || c.used != len(c.byKey)*(entryCost+4) || c.lru.Len() != len(c.byKey) {
		t.Errorf("used %d for %d entries (%d in the list); budget %d", c.used, len(c.byKey), c.lru.Len(), budget)
	}
	if _, _, ok := c.get(p, 19_999); !ok {
		t.Error("the newest entry was evicted")
	}
	if _, _, ok := c.get(p, 0); ok {
		t.Error("the oldest entry is still held")
	}
}
