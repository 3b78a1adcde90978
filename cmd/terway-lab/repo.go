package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

const modulePath = "github.com/terway-sim/terway"

// findRepo returns the project's source tree: dir if given, else the
// nearest directory above the working directory whose go.mod declares
// this module. up builds the lab's binaries and images from it.
func findRepo(dir string) (string, error) {
	if dir != "" {
		if !isRepo(dir) {
			return "", fmt.Errorf("%s is not the %s source tree", dir, modulePath)
		}
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isRepo(d) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", errors.New("run terway-lab inside the project's source tree, or pass --repo")
		}
	}
}

func isRepo(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.HasPrefix(data, []byte("module "+modulePath+"\n"))
}
