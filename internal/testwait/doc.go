// Package testwait is how the tests wait for something to happen: they poll
// a condition with k8s.io/apimachinery's wait.PollUntilContextTimeout and
// fail with what they waited for, never sleep for it. A test that lets time
// pass on purpose sleeps and says so beside the sleep; one that proves that
// something does not happen uses testing/synctest, or first proves its event
// path is live. It imports nothing of this module, so that every test,
// internal or external, unit or integration, can use it.
//
// No code but tests imports it.
package testwait
