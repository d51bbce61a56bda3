// Package systemlab holds klasy's end-to-end tests on a Debian system lab
// (lab.Config.System): klasy run as root inside it with no --lab, on the
// local target, and klasy's Debian package installed there with apt, its
// agent service woven through from the host, and removed. They run the
// klasy binary as a user does; the package has no code of its own.
package systemlab
