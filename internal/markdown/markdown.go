// Package markdown escapes text for the project's Markdown reports (the
// benchmark report, the chaos report), so that names and commands taken
// from data read as written: never as formatting, links, HTML or a table
// cell's end.
package markdown

import "strings"

// Text escapes s for Markdown text and table cells: characters that
// would start formatting, links or HTML, and the cell separator; line
// breaks become spaces.
func Text(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '\\', '`', '*', '_', '[', ']', '<', '>', '|', '#':
			b.WriteByte('\\')
			b.WriteRune(c)
		case '\n', '\r':
			b.WriteByte(' ')
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// Code makes s a code span usable inside a table cell: delimited by more
// backticks than s contains in a row, with '|' escaped (GitHub splits
// cells before parsing code spans).
func Code(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ", "|", `\|`).Replace(s)
	ticks := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return ticks + s + ticks
}

// Fence returns a code fence longer than any backtick run in s, so that
// s can be shown verbatim between two of them.
func Fence(s string) string {
	return strings.Repeat("`", max(3, longestRun(s, '`')+1))
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c rune) int {
	best, n := 0, 0
	for _, r := range s {
		if r == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}
