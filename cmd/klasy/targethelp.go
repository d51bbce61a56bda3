package main

// targetHelp ends the help of each command that acts on one kernel;
// domainsHelp that of each command that also takes --domains FILE.

const targetHelp = `Target (the running kernel to weave into):
  --lab NAME        a lab started with 'klasy lab up' (its image and
                    headers are known); otherwise this machine's kernel,
                    as root, with
  --vmlinux IMAGE   the running kernel's vmlinux with DWARF (default
                    /usr/lib/debug/boot/vmlinux-$(uname -r))
  --headers DIR     its kbuild tree (default /lib/modules/$(uname -r)/build)

An image that is not the running kernel's build is refused (the
build-id in /sys/kernel/notes is compared with the image's).
  --module PATH.ko  also weave into this module (repeatable): its access
                    and execution join points; one built
                    with the klasy plugin and loaded in the target
                    kernel, as the same build (its build-id in
                    /sys/module/NAME/notes is compared with the file's)
`

const domainsHelp = `
Several kernels at once (--domains FILE): every domain of a domains file
(YAML; see 'klasy agent keys' and package domains), each reached through
a lab of 'klasy lab up' (lab: NAME) or an agent over mutual TLS
(address: HOST:PORT, with the file's ca: and controller: keys, which
'klasy agent keys FILE' makes), with its kernel image, headers and
plugin-built modules (vmlinux:, headers:, modules:; a lab knows its
own). A Xen lab writes such a file (klasy lab status shows where):

  domains:
    - name: a
      lab: klasy-a
    - name: b
      address: 127.0.0.1:40111
      cert: keys/b.crt
      key: keys/b.key
      vmlinux: /srv/b/vmlinux
      headers: /srv/b/build
      modules: [/srv/b/xen-netback.ko]

A domain gets only the advice its qualifiers allow: within_file(F@D) and
within_function(G@D) hold in domain D only. An AND-group of a pointcut
goes to every domain when it names none, to D when it names D; an advice
no domain gets is an error. weave resolves and builds for every domain
before it loads into any; a domain that fails (unreachable, a hook its
kernel refuses) fails the weave everywhere: the aspect is unwoven from
the domains it reached, and the error names the domain. Reports are
per domain; --json objects of weave and list have "domain" added.

  klasy weave --domains labs.yaml examples/netflow.klasy
  klasy status --domains labs.yaml
  klasy unweave --domains labs.yaml netflow
`
