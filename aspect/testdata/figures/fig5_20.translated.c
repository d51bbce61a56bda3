<!-- Figure 5.20 of the dissertation: a code example for the xflow pointcut
     without the 3rd parameter (the translation of the <advice> of Figure
     5.19). random_str stands for a generated, collision-free variable name.
     The figure's placeholder line is kept as a C comment. -->
<advice>
  <pointcut>
    access(sk_buff.%) AND target(skb)
  </pointcut>
  <before>
    int random_str = get_flowid(netflow, skb);
    if (random_str != 0) {
      /* ... here is the advice ... */
    }
  </before>
</advice>
