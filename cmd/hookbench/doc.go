// Command hookbench is Hookline's benchmark and acceptance harness: a
// verifying webhook receiver (receive), the machine's raw limit (raw), and
// scenarios that drive a real node (run). main.go is the wiring; the
// receiver, the raw loop, the node process and the scenarios live in their
// own files.
package main
