-- TPC-H Q14: promotion effect. Validation parameter: DATE = 1995-09-01.
select
    100.00 * sum(case
        when p_type like 'PROMO%'
            then l_extendedprice * (1 - l_discount)
        else 0
    end) / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from
    lineitem,
    part
where
    l_partkey = p_partkey
    and l_shipdate >= date '{DATE}'
    and l_shipdate < date '{DATE}' + interval '1' month
