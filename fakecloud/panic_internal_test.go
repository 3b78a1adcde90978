package fakecloud

// panicTestAction is an ECS action that exists only in this package's test
// binary and whose handler panics, so that tests can check how a handler
// panic is answered, counted and logged without depending on a real bug.
// It is registered in init, before any test runs, so the action table is
// never written while requests read it.
const panicTestAction = "FakecloudTestPanic"

func init() {
	actions[ECSVersion][panicTestAction] = &action{
		product: productECS,
		name:    panicTestAction,
		handler: func(*Cloud, *call) (response, error) { panic("deliberate test panic") },
	}
}
