// Package status computes a LlamaStackDistribution's status: one pure function per
// condition and the phase, from the CR and what a sync observed of its children
// (Observed) and what the controller knows besides (Facts), put together by Calculate;
// and what tells when a status write has a new warning to record. Writing the status
// and recording its Events stay with the controller.
package status
