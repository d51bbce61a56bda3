// Package multi weaves one aspect into the domains of a domains file
// (XenLASY): each domain gets the advice its @domain qualifiers send it,
// every domain is built before any is loaded, and a failure in one
// unweaves the aspect from the others; errors name the domain.
package multi
