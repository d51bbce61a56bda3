<!-- Figure 5.12 of the dissertation: a code example for the start element
     (the translation of the <start> of Figure 5.9). random_string stands for
     a generated, collision-free variable name. -->
<advice>
  <pointcut>
    access(sk_buff.data) AND
    within_function(alloc_skb_from_cache)
    AND target(random_string)
  </pointcut>
  <before>
    register_flowid(netflow, random_string,
      get_new_flowid());
  </before>
</advice>
