// SPDX-License-Identifier: GPL-2.0
/*
 * klasy_prog - what the weaver's tests run inside a lab guest: each
 * subcommand makes system calls with values the test then finds in the
 * trace. Built static on the host (gcc -static) and sent to the guest.
 *
 *   klasy_prog pread FILE COUNT POS N    pread(2) N times
 *   klasy_prog open-missing PATH N       openat(2) a missing file N times
 *   klasy_prog cat FILE                  read FILE to the end (e.g. /proc/self/mounts)
 *   klasy_prog getppid N                 getppid(2) N times
 *   klasy_prog time-getppid N            getppid(2) N times, prints ns per call
 *   klasy_prog tcp-read IP PORT BYTES    connect to IP:PORT, read BYTES, print them
 *                                        (packets into the guest's network stack)
 *   klasy_prog time-lseek FILE N         lseek(2) N times (offsets 1, 2, 1, ...), prints ns per call
 *   klasy_prog lseek FILE OFF...         lseek(2) FILE to each OFF from its start
 *   klasy_prog lseek-ret FILE OFF WHENCE N
 *                                        lseek(2) FILE N times, print what each returned
 *   klasy_prog tcp-send IP PORT SIZE N GAP_MS
 *                                        connect to IP:PORT (retrying while refused),
 *                                        write N blocks of SIZE bytes GAP_MS apart
 *                                        (TCP_NODELAY), then wait for the peer to close
 *   klasy_prog tcp-recv PORT BYTES WAIT_MS
 *                                        accept one connection on PORT, sleep WAIT_MS
 *                                        (the data waits unread), read BYTES, print
 *                                        how many came, close
 *   klasy_prog getppid-split N           getppid(2) N/2 times on CPU 0, the rest on CPU 1
 *   klasy_prog pread-range FILE COUNT POS N
 *                                        on CPU 0, pread(2) at POS, POS+1, ... POS+N-1
 *   klasy_prog sleep MS N                nanosleep(2) MS milliseconds, N times
 *   klasy_prog sleepers K MS1 N MS2      K child processes nanosleep(2) MS1 ms at
 *                                        once, then one child at a time N times
 *                                        MS2 ms; prints "child PID" for each
 *   klasy_prog spin MS N                 N times: getpgid(2), MS milliseconds of
 *                                        busy loop (half on CPU 0, half on CPU 1), getsid(2)
 *   klasy_prog mkdir PATH N              mkdir(2) PATH N times: the first may make
 *                                        it, the others fail with EEXIST
 *   klasy_prog fork N                    fork(2) N children that exit at once,
 *                                        print "child PID" for each, reap them
 *   klasy_prog time-write FILE SRC [trunc]
 *                                        write SRC's bytes to FILE in one write(2)
 *                                        (appending, or truncating it with trunc),
 *                                        print "ns N": open to close (make bench
 *                                        times kprobe_events with it)
 *
 * It prints its pid first, so the test can pick its records.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* pin moves the program to cpu, or exits. */
static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		fprintf(stderr, "klasy_prog: to CPU %d: %s\n", cpu, strerror(errno));
		exit(1);
	}
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* spin busy-loops for ms milliseconds. */
static void spin(double ms)
{
	double end = now_ms() + ms;

	while (now_ms() < end)
		;
}

static void sleep_ms(long ms)
{
	struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };

	if (nanosleep(&t, NULL) < 0) {
		perror("nanosleep");
		exit(1);
	}
}

static void pipe_or_exit(int fd[2])
{
	if (pipe(fd) < 0) {
		perror("pipe");
		exit(1);
	}
}

static void xfer(int fd, bool out)
{
	char c = 0;

	if ((out ? write(fd, &c, 1) : read(fd, &c, 1)) != 1) {
		perror(out ? "write" : "read");
		exit(1);
	}
}

/*
 * sleepers: more tasks in nanosleep at once than a kretprobe has
 * instances (so some returns are missed), then each task's later sleeps
 * one task at a time (so none is).
 */
static int sleepers(long k, long ms1, long n, long ms2)
{
	int done[2], go[64][2];
	long i, j;
	pid_t pid;

	if (k < 1 || k > 64)
		return 2;
	pipe_or_exit(done);
	for (i = 0; i < k; i++) {
		pipe_or_exit(go[i]);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			sleep_ms(ms1);
			xfer(done[1], true);
			xfer(go[i][0], false);
			for (j = 0; j < n; j++)
				sleep_ms(ms2);
			xfer(done[1], true);
			_exit(0);
		}
		printf("child %d\n", pid);
	}
	fflush(stdout);
	for (i = 0; i < k; i++)
		xfer(done[0], false);
	for (i = 0; i < k; i++) {
		xfer(go[i][1], true);
		xfer(done[0], false);
	}
	while (wait(NULL) > 0)
		;
	return 0;
}

static long arg(const char *s)
{
	char *end;
	long v = strtol(s, &end, 0);

	if (*s == '\0' || *end != '\0') {
		fprintf(stderr, "klasy_prog: bad number %s\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	char buf[4096];
	long i, n;

	if (argc < 2) {
		fprintf(stderr, "usage: klasy_prog pread|read|open-missing|cat|getppid|time-getppid|tcp-read|lseek|time-lseek|lseek-ret|tcp-send|tcp-recv|getppid-split|pread-range|sleep|sleepers|spin|mkdir|fork ...\n");
		return 2;
	}
	printf("pid %d\n", getpid());
	fflush(stdout);
	if (strcmp(argv[1], "pread") == 0 && argc == 6) {
		int fd = open(argv[2], O_RDONLY);
		long count = arg(argv[3]), pos = arg(argv[4]);

		if (fd < 0 || count > (long)sizeof(buf)) {
			perror(argv[2]);
			return 1;
		}
		n = arg(argv[5]);
		for (i = 0; i < n; i++)
			if (pread(fd, buf, count, pos) < 0) {
				perror("pread");
				return 1;
			}
		printf("fd %d\n", fd);
		return 0;
	}
	if (strcmp(argv[1], "read") == 0 && argc == 4) {
		int fd = open(argv[2], O_RDONLY);

		if (fd < 0) {
			perror(argv[2]);
			return 1;
		}
		n = arg(argv[3]);
		for (i = 0; i < n; i++)
			if (read(fd, buf, 1) < 0) {
				perror("read");
				return 1;
			}
		return 0;
	}
	if (strcmp(argv[1], "open-missing") == 0 && argc == 4) {
		n = arg(argv[3]);
		for (i = 0; i < n; i++) {
			int fd = openat(AT_FDCWD, argv[2], O_RDONLY);

			if (fd >= 0 || errno != ENOENT) {
				fprintf(stderr, "klasy_prog: %s exists\n", argv[2]);
				return 1;
			}
		}
		return 0;
	}
	if (strcmp(argv[1], "fork") == 0 && argc == 3) {
		n = arg(argv[2]);
		for (i = 0; i < n; i++) {
			pid_t c = fork();

			if (c < 0) {
				perror("fork");
				return 1;
			}
			if (c == 0)
				_exit(0);
			printf("child %d\n", c);
			waitpid(c, NULL, 0);
		}
		return 0;
	}
	if (strcmp(argv[1], "mkdir") == 0 && argc == 4) {
		int made = 0;

		n = arg(argv[3]);
		for (i = 0; i < n; i++) {
			if (mkdir(argv[2], 0755) == 0)
				made++;
			else if (errno != EEXIST) {
				perror(argv[2]);
				return 1;
			}
		}
		printf("made %d\n", made);
		return 0;
	}
	if (strcmp(argv[1], "cat") == 0 && argc == 3) {
		FILE *f = fopen(argv[2], "r");

		if (!f) {
			perror(argv[2]);
			return 1;
		}
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, n, stdout);
		fclose(f);
		return 0;
	}
	if (strcmp(argv[1], "time-write") == 0 && (argc == 4 || argc == 5)) {
		static char text[1 << 20];
		struct timespec a, b;
		FILE *f = fopen(argv[3], "r");
		size_t len;
		int fd;

		if (!f) {
			perror(argv[3]);
			return 1;
		}
		len = fread(text, 1, sizeof(text), f);
		fclose(f);
		clock_gettime(CLOCK_MONOTONIC, &a);
		fd = open(argv[2], O_WRONLY | (argc == 5 ? O_TRUNC : O_APPEND));
		if (fd < 0 || (len && write(fd, text, len) != (ssize_t)len) || close(fd)) {
			perror(argv[2]);
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("ns %.0f\n", (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
		return 0;
	}
	if ((strcmp(argv[1], "getppid") == 0 || strcmp(argv[1], "time-getppid") == 0) && argc == 3) {
		struct timespec a, b;

		n = arg(argv[2]);
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (i = 0; i < n; i++)
			syscall(SYS_getppid);
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (argv[1][0] == 't')
			printf("ns/call %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
		return 0;
	}
	if (strcmp(argv[1], "tcp-read") == 0 && argc == 5) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(arg(argv[3])) };
		long want = arg(argv[4]), got = 0;
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (s < 0 || inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1 ||
		    connect(s, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
			perror("tcp-read");
			return 1;
		}
		while (got < want && (n = read(s, buf, sizeof(buf))) > 0) {
			fwrite(buf, 1, n, stdout);
			got += n;
		}
		close(s);
		return got == want ? 0 : 1;
	}
	if (strcmp(argv[1], "time-lseek") == 0 && argc == 4) {
		struct timespec a, b;
		int fd = open(argv[2], O_RDONLY);

		if (fd < 0) {
			perror(argv[2]);
			return 1;
		}
		n = arg(argv[3]);
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (i = 0; i < n; i++)
			lseek(fd, 1 + (i & 1), SEEK_SET);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("ns/call %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
		return 0;
	}
	if (strcmp(argv[1], "lseek") == 0 && argc >= 4) {
		int fd = open(argv[2], O_RDONLY);

		if (fd < 0) {
			perror(argv[2]);
			return 1;
		}
		for (i = 3; i < argc; i++)
			if (lseek(fd, arg(argv[i]), SEEK_SET) < 0) {
				perror("lseek");
				return 1;
			}
		close(fd);
		return 0;
	}
	if (strcmp(argv[1], "lseek-ret") == 0 && argc == 6) {
		int fd = open(argv[2], O_RDONLY);
		long off = arg(argv[3]), whence = arg(argv[4]);

		if (fd < 0) {
			perror(argv[2]);
			return 1;
		}
		n = arg(argv[5]);
		for (i = 0; i < n; i++) {
			off_t r = lseek(fd, off, whence);

			if (r < 0)
				printf("ret %lld errno %d\n", (long long)r, errno);
			else
				printf("ret %lld\n", (long long)r);
		}
		printf("fd %d\n", fd);
		close(fd);
		return 0;
	}
	if (strcmp(argv[1], "tcp-send") == 0 && argc == 7) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(arg(argv[3])) };
		long size = arg(argv[4]), gap = arg(argv[6]), sent = 0;
		struct timespec t = { .tv_sec = gap / 1000, .tv_nsec = gap % 1000 * 1000000 };
		int s = -1, one = 1, tries;

		n = arg(argv[5]);
		if (size < 1 || size > (long)sizeof(buf) || inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1) {
			fprintf(stderr, "klasy_prog: tcp-send: bad address or size\n");
			return 2;
		}
		memset(buf, 'k', size);
		/*
		 * The receiver may not listen yet: retry for 30 s. A loaded
		 * host has also given a reset on connect (the lab's SYN met
		 * the listener half set up): retried too.
		 */
		for (tries = 0; tries < 300; tries++) {
			s = socket(AF_INET, SOCK_STREAM, 0);
			if (s < 0 || connect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0)
				break;
			close(s);
			s = -1;
			if (errno != ECONNREFUSED && errno != ECONNRESET && errno != EHOSTUNREACH &&
			    errno != ETIMEDOUT)
				break;
			usleep(100000);
		}
		if (s < 0 || setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
			perror("tcp-send");
			return 1;
		}
		for (i = 0; i < n; i++) {
			if (i && gap)
				nanosleep(&t, NULL);
			if (write(s, buf, size) != size) {
				perror("tcp-send: write");
				return 1;
			}
			sent += size;
		}
		shutdown(s, SHUT_WR);
		while (read(s, buf, sizeof(buf)) > 0)
			;
		close(s);
		printf("sent %ld\n", sent);
		return 0;
	}
	if (strcmp(argv[1], "tcp-recv") == 0 && argc == 5) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(arg(argv[2])) };
		long want = arg(argv[3]), got = 0, wait = arg(argv[4]);
		struct timespec t = { .tv_sec = wait / 1000, .tv_nsec = wait % 1000 * 1000000 };
		int l = socket(AF_INET, SOCK_STREAM, 0), s, one = 1;

		if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    bind(l, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(l, 1) < 0 ||
		    (s = accept(l, NULL, NULL)) < 0) {
			perror("tcp-recv");
			return 1;
		}
		close(l);
		nanosleep(&t, NULL);
		while (got < want && (n = read(s, buf, sizeof(buf))) > 0)
			got += n;
		close(s);
		printf("received %ld\n", got);
		return got == want ? 0 : 1;
	}
	if (strcmp(argv[1], "getppid-split") == 0 && argc == 3) {
		n = arg(argv[2]);
		pin(0);
		for (i = 0; i < n / 2; i++)
			syscall(SYS_getppid);
		pin(1);
		for (; i < n; i++)
			syscall(SYS_getppid);
		return 0;
	}
	if (strcmp(argv[1], "pread-range") == 0 && argc == 6) {
		int fd = open(argv[2], O_RDONLY);
		long count = arg(argv[3]), pos = arg(argv[4]);

		if (fd < 0 || count > (long)sizeof(buf)) {
			perror(argv[2]);
			return 1;
		}
		pin(0);
		n = arg(argv[5]);
		for (i = 0; i < n; i++)
			if (pread(fd, buf, count, pos + i) < 0) {
				perror("pread");
				return 1;
			}
		return 0;
	}
	if (strcmp(argv[1], "sleep") == 0 && argc == 4) {
		long ms = arg(argv[2]);
		struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };

		n = arg(argv[3]);
		for (i = 0; i < n; i++)
			if (nanosleep(&t, NULL) < 0) {
				perror("nanosleep");
				return 1;
			}
		return 0;
	}
	if (strcmp(argv[1], "sleepers") == 0 && argc == 6)
		return sleepers(arg(argv[2]), arg(argv[3]), arg(argv[4]), arg(argv[5]));
	if (strcmp(argv[1], "spin") == 0 && argc == 4) {
		long ms = arg(argv[2]);

		n = arg(argv[3]);
		for (i = 0; i < n; i++) {
			pin(0);
			syscall(SYS_getpgid, 0);
			spin(ms / 2.0);
			pin(1);
			spin(ms / 2.0);
			syscall(SYS_getsid, 0);
		}
		return 0;
	}
	fprintf(stderr, "klasy_prog: unknown or malformed command %s\n", argv[1]);
	return 2;
}
