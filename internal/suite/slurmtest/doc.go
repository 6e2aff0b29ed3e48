// Package slurmtest holds the test of scripts/slurm-suite.sh against a real
// Slurm: a cluster of one node, started on localhost from Debian's
// packages (slurmctld, slurmd, munge) with a configuration and a munge
// key of its own, which the test submits suites to, stops a task of, and
// takes down again. The package has no code outside its tests.
package slurmtest
