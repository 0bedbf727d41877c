// Package crdcheck holds tests that check the generated CRD in artifacts/crd the way
// the API server does, without running one: the schema must be structural, every CEL
// rule must compile within the cost budget, the examples must be admitted, and invalid
// objects must be rejected with a useful message.
//
// Run them with hack/test-crd.sh. They live in the hack/tools module so that the
// apiextensions-apiserver libraries never become dependencies of the controller.
package crdcheck
