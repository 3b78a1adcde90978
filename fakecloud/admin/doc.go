// Package admin is the client side of fakecloud's admin API (the routes
// under /fakecloud/, see fakecloud/README.md) and the types that API
// exchanges: the view of the world, faults, call counters, settings.
//
// It is what a lab, a scenario suite, an audit or a chaos engine uses to
// read and steer a fakecloud running in another process: inject faults
// on the API and the metadata service and prove they fired (Faults,
// MetadataCalls), cut throttle budgets and slow transitions
// (UpdateSettings), stop, start and release instances, and drain and
// refill vSwitches. It does not import the
// emulator, so such a program does not link it. The emulator (package
// fakecloud) answers with these same types; its Go API names them too,
// as aliases.
package admin
