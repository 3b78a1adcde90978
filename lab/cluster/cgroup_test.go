package cluster

import "testing"

func TestIsLabCgroup(t *testing.T) {
	for rel, want := range map[string]bool{
		nodeCgroup("lab-1"):                 true,
		nodeCgroup("lab-2") + "/kubepods/x": true,
		"terway-labx/y":                     false,
		"user.slice":                        false,
		"system.slice/terway-lab.lab-1":     false,
		"":                                  false,
	} {
		if got := IsLabCgroup(rel); got != want {
			t.Errorf("IsLabCgroup(%q) = %v, want %v", rel, got, want)
		}
	}
}
