package fakecloud

import (
	"encoding/base64"

	"github.com/terway-sim/terway/fakecloud/wire"
)

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

// nextToken is the NextToken of the page starting at key: opaque to
// clients, empty after the last page.
func nextToken(key string) string {
	if key == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(key))
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
	m := pageMarks{TotalCount: found.total, NextToken: nextToken(found.next)}
	if !pg.token {
		m.PageNumber, m.PageSize = pg.number, pg.size
	}
	return m
}
