<!-- Figure 5.13 of the dissertation: a code example for the transit element
     (the translation of the <transit> with <move> of Figure 5.9). random_str1
     and random_str2 stand for generated, collision-free variable names. -->
<advice>
  <pointcut>
    access(sk_buff.head) AND
    within_function(skb_clone)
    AND local_var(skb, random_str1)
    AND local_var(n, random_str2)
  </pointcut>
  <before>
    void *skb = *(void**)random_str1;
    void *n = *(void**)random_str2;
    int id = get_flowid(netflow, skb);
    if (id != 0) {
      register_flowid(netflow, n, id);
      remove_flowid(netflow, skb);
    }
  </before>
</advice>
