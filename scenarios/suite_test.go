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
// machine without a cluster stays green.
func TestScenarios(t *testing.T) {
	e, skip, err := loadEnv()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip("scenarios skipped: " + skip)
	}
	env = e
	t.Log("scenarios:", env.Tiers())
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
