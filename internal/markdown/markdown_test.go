package markdown

import "testing"

func TestEscapes(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Text("a|b_*c* [x](y) <b>\n#1"), `a\|b\_\*c\* \[x\](y) \<b\> \#1`},
		{Code("x|y"), "`x\\|y`"},
		{Code("a ``b`` c"), "```a ``b`` c```"},
		{Code("`edge"), "`` `edge ``"},
		{Fence("plain"), "```"},
		{Fence("run ```weird````"), "`````"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
