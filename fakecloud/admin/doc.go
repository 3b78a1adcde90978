// Package admin is the client side of fakecloud's admin API (the routes
// under /fakecloud/, see fakecloud/README.md) and the types that API
// exchanges: the view of the world, faults, call counters.
//
// It is what a lab, a scenario suite or an audit uses to read and steer a
// fakecloud running in another process, and it does not import the
// emulator, so such a program does not link it. The emulator (package
// fakecloud) answers with these same types; its Go API names them too,
// as aliases.
package admin
