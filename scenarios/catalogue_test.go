package scenarios

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/terway-sim/terway/daemon/mode"
)

// minCatalogueSpecs is how many specs the catalogue has at least (smoke
// and feature; chaos specs come on top). A spec tree that no longer builds
// without a cluster, or a lost file, shows as fewer.
const minCatalogueSpecs = 36

// modeLabels are the labels naming the modes a spec is for.
var modeLabels = []string{string(mode.ENIMultiIP), string(mode.ENIOnly), string(mode.VPC), labelAnyMode}

// TestCatalogueDryRun lists the catalogue the way a developer does without
// a cluster (go test ./scenarios/ -args -ginkgo.dry-run -ginkgo.v): it runs
// this test binary again, without KUBECONFIG, with a dry run of
// TestScenarios, and checks that every spec is listed and labelled.
func TestCatalogueDryRun(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestScenarios$", "-test.v",
		"-ginkgo.dry-run", "-ginkgo.v", "-ginkgo.no-color", "-ginkgo.json-report="+report)
	cmd.Env = withoutEnv(os.Environ(), envKubeconfig, envCloudURL, envCloudToken, envLabDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Ran (\d+) of (\d+) Specs`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("dry run printed no \"Ran N of N Specs\":\n%s", out)
	}
	ran, total := atoi(t, m[1]), atoi(t, m[2])
	if ran != total || ran < minCatalogueSpecs {
		t.Errorf("dry run: Ran %d of %d Specs, want all of at least %d", ran, total, minCatalogueSpecs)
	}
	for _, problem := range labelProblems(readReport(t, report)) {
		t.Error(problem)
	}
}

func atoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

func readReport(t *testing.T, path string) types.Report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(reports) != 1 {
		t.Fatalf("%s: %d suite reports, want 1", path, len(reports))
	}
	return reports[0]
}

// labelProblems says which specs lack exactly one kind label, and which
// smoke or feature specs lack a mode label (chaos specs choose their own).
func labelProblems(r types.Report) []string {
	var out []string
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		labels := s.Labels()
		kinds := slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return !slices.Contains(kindLabels, l) })
		name := s.FullText()
		if len(kinds) != 1 {
			out = append(out, name+": kind labels "+strings.Join(kinds, ",")+", want one of "+strings.Join(kindLabels, ","))
		}
		if len(kinds) == 1 && kinds[0] != labelChaos &&
			!slices.ContainsFunc(labels, func(l string) bool { return slices.Contains(modeLabels, l) }) {
			out = append(out, name+": no mode label (one of "+strings.Join(modeLabels, ",")+")")
		}
	}
	return out
}
