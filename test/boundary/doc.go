// Package boundary holds the test that keeps the data flow of docs/design.md true in the
// imports: sync → graph → nft, with ifmon beside, agent and cmd on top, the contracts between
// stages in leaf packages (model, dataplane), no Kubernetes package below sync, and the test
// harness (internal/testenv) imported only by tests and the demo.
//
// The package has only this file besides its test; nothing imports it.
package boundary
