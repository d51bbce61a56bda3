/*
 * udp_prog - UDP datagrams between two labs for the flow test
 * (flow_lan_lab_test.go), from sockets that are not connected:
 *
 *   udp_prog send ADDR PORT N SIZE   sends N atomic datagrams of SIZE bytes, 20 ms apart
 *   udp_prog recv PORT N SECONDS     prints "got K" after N datagrams or SECONDS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char buf[2048];
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0) {
		perror("socket");
		return 1;
	}
	if (argc == 6 && !strcmp(argv[1], "send")) {
		int i, n = atoi(argv[4]), size = atoi(argv[5]);

		if (size < 1 || size > (int)sizeof(buf) || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1)
			return 2;
		a.sin_port = htons(atoi(argv[3]));
		/*
		 * Atomic datagrams (RFC 6864): DF and never fragmented here;
		 * Linux then sends ID 0 from a socket that is not connected
		 * (with the default IP_PMTUDISC_WANT it sets ignore_df and a
		 * hashed ID).
		 */
		if (setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &(int){ IP_PMTUDISC_DO }, sizeof(int)) < 0) {
			perror("IP_MTU_DISCOVER");
			return 1;
		}
		memset(buf, 'k', size);
		for (i = 0; i < n; i++) {
			if (sendto(s, buf, size, 0, (struct sockaddr *)&a, sizeof(a)) != size) {
				perror("sendto");
				return 1;
			}
			usleep(20000);
		}
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "recv")) {
		struct timeval tv = { .tv_sec = atoi(argv[4]) };
		int got = 0, n = atoi(argv[3]);

		a.sin_port = htons(atoi(argv[2]));
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
			perror("bind");
			return 1;
		}
		while (got < n && recv(s, buf, sizeof(buf), 0) >= 0)
			got++;
		printf("got %d\n", got);
		return 0;
	}
	fprintf(stderr, "usage: udp_prog send ADDR PORT N SIZE | recv PORT N SECONDS\n");
	return 2;
}
