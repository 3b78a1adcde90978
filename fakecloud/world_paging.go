package fakecloud

import "sort"

// paging is how a Describe call asked for its page: by PageNumber and
// PageSize, or (token is true) by NextToken and MaxResults, where next is
// the key the page starts at. The API layer decodes it (parsePaging, and
// writes keys as NextTokens); the world's queries cut their page with it
// (pageOf).
type paging struct {
	token  bool
	number int
	size   int
	next   string
}

// pageOf cuts one page out of items (sorted by key) and returns the key
// the next page starts at ("" when this is the last).
func pageOf[T any](pg paging, items []T, key func(T) string) ([]T, string) {
	if !pg.token {
		start, ok := pageStart(pg.number, pg.size, len(items))
		if !ok {
			return nil, ""
		}
		end := min(start+pg.size, len(items))
		return items[start:end], ""
	}
	start := 0
	if pg.next != "" {
		start = sort.Search(len(items), func(i int) bool { return key(items[i]) >= pg.next })
	}
	end := min(start+pg.size, len(items))
	next := ""
	if end < len(items) {
		next = key(items[end])
	}
	return items[start:end], next
}

// pageStart returns the index of the first item of page number (from 1)
// of size items, and false when that page lies past n items. Clients pick
// PageNumber freely (up to MaxInt64), so (number-1)*size must not be
// computed before number is known to be small: the product overflows to a
// negative index. Comparing number-1 against n/size first keeps every
// intermediate value at most n.
func pageStart(number, size, n int) (int, bool) {
	if number < 1 || size < 1 || number-1 > n/size {
		return 0, false
	}
	start := (number - 1) * size
	return start, start < n
}
