package main

// The client auth plugins kubectl links: kubeconfigs whose user names an
// auth-provider (oidc) work as they do with kubectl. Exec credential
// plugins are built into client-go.
import _ "k8s.io/client-go/plugin/pkg/client/auth"
