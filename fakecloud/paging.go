package fakecloud

import (
	"encoding/base64"
	"sort"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// paging is how a Describe call asked for its page: by PageNumber and
// PageSize, or (token is true) by NextToken and MaxResults. The API layer
// decodes it (parsePaging); the world's queries cut their page with it
// (pageOf).
type paging struct {
	token  bool
	number int
	size   int
	next   string
}

// parsePaging reads both paging styles. maxPage bounds PageSize and
// maxResults bounds MaxResults (0: that style is not offered).
func parsePaging(p wire.Params, maxPage, maxResults int) (paging, error) {
	if maxResults > 0 && (p.Has("NextToken") || p.Has("MaxResults")) {
		n, err := p.Int("MaxResults", 10)
		if err != nil {
			return paging{}, err
		}
		if n < 1 || n > maxResults {
			return paging{}, errInvalid("MaxResults", p.String("MaxResults"))
		}
		pg := paging{token: true, size: n}
		if t := p.String("NextToken"); t != "" {
			b, err := base64.RawURLEncoding.DecodeString(t)
			if err != nil || len(b) == 0 {
				return paging{}, apiErr(400, CodeNextTokenInvalid, "The specified NextToken is not valid.")
			}
			pg.next = string(b)
		}
		return pg, nil
	}
	if maxPage == 0 {
		maxPage = 100
	}
	num, err := p.Int("PageNumber", 1)
	if err != nil {
		return paging{}, err
	}
	size, err := p.Int("PageSize", 10)
	if err != nil {
		return paging{}, err
	}
	if num < 1 {
		return paging{}, errInvalid("PageNumber", p.String("PageNumber"))
	}
	if size < 1 || size > maxPage {
		return paging{}, errInvalid("PageSize", p.String("PageSize"))
	}
	return paging{number: num, size: size}, nil
}

// pageOf cuts one page out of items (sorted by key) and returns the token
// of the next page ("" when this is the last).
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
		next = base64.RawURLEncoding.EncodeToString([]byte(key(items[end])))
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

// pageNumbers are the paging fields of an answer paged by number.
type pageNumbers struct {
	TotalCount int `json:"TotalCount"`
	PageNumber int `json:"PageNumber"`
	PageSize   int `json:"PageSize"`
}

func numbersOf[S any](pg paging, found page[S]) pageNumbers {
	return pageNumbers{TotalCount: found.total, PageNumber: pg.number, PageSize: pg.size}
}

// pageMarks are the paging fields of an answer paged by number or by
// NextToken: the page's number and size only in the first case.
type pageMarks struct {
	TotalCount int    `json:"TotalCount"`
	PageNumber int    `json:"PageNumber,omitempty"`
	PageSize   int    `json:"PageSize,omitempty"`
	NextToken  string `json:"NextToken"`
}

func marksOf[S any](pg paging, found page[S]) pageMarks {
	m := pageMarks{TotalCount: found.total, NextToken: found.next}
	if !pg.token {
		m.PageNumber, m.PageSize = pg.number, pg.size
	}
	return m
}
