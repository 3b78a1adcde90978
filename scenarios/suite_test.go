package scenarios

import (
	"flag"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
)

// env is the cluster the suite runs against; TestScenarios sets it.
var env *Env

// TestScenarios runs the scenario suites:
//
//	go test ./scenarios/ -v -timeout 20m [-args -ginkgo.v -ginkgo.label-filter=ENIMultiIP]
//
// Without KUBECONFIG it skips, saying why, so `go test ./...` on a
// machine without a cluster stays green. With -ginkgo.dry-run it lists
// the catalogue without a cluster: the spec trees are built without
// touching env, and dry-run runs none of the bodies that would.
func TestScenarios(t *testing.T) {
	suiteConfig, _ := GinkgoConfiguration()
	e, skip, err := loadEnv()
	switch {
	case err != nil && !suiteConfig.DryRun:
		t.Fatal(err)
	case skip != "" && !suiteConfig.DryRun:
		t.Skip("scenarios skipped: " + skip)
	case e != nil:
		env = e
		t.Log("scenarios:", env.Tiers())
	default:
		t.Log("dry run without a cluster: specs are listed, none is run")
	}
	quietKlog()
	RegisterFailHandler(Fail)
	RunSpecs(t, "Terway scenarios")
}

var _ = BeforeSuite(func() {
	AddReportEntry("tiers", env.Tiers())
})

// quietKlog sends client-go's klog lines (an exec stream closed by a
// timeout logs "Copying stdout failed") to GinkgoWriter, so they show
// with the failure they belong to, or with -ginkgo.v.
func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(GinkgoWriter)
}
