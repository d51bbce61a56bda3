<!-- Figure 5.18 of the dissertation: a code example for the xflow pointcut
     (the translation of the <advice> of Figure 5.2). -->
<advice>
  <pointcut>
    access(sk_buff.%) AND target(skb)
  </pointcut>
  <before>
    int id = get_flowid(netflow, skb);
    if (id != 0) {
      long long tsc;
      DO_RDTSC(tsc);
      STORE_DATA3($pc$, tsc, id);
    }
  </before>
</advice>
