// Package revision holds the types of what the server pods of a LlamaStackDistribution
// are made from (the image and server version, the config mounted and its hash, the CA
// bundle, the server's certificate) and the paths and variables through which the pods
// read them. pkg/controller resolves a revision in each sync; the builders of
// pkg/controller/children make the pods of it. Nothing here needs the Controller: the
// package imports only the API types and the controller's leaf packages.
package revision
