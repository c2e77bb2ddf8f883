// Package exceptions ends exceptions (issue 42): every replica watches the
// ends of the exceptions the namespaces declare and, at an end, writes the
// namespace's implicit.dev/exceptions-expired mark, with the namespace's
// resourceVersion, so one write wins and every view, answer and replica
// switches at that revision. It also warns (Events, gauges) before an end.
//
// It builds on the server's shared namespace informer, pkg/merge's reading
// of the exception annotations (ExceptionsOf, ExceptionDigest) and a client
// that may patch namespaces; state is always read from annotations, the
// clock only decides when to write.
//
// It imports pkg/merge and pkg/apis only of this module, and must not
// import pkg/watchmux, pkg/views, pkg/registry or pkg/apiserver.
package exceptions
