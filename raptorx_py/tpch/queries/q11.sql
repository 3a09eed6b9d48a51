-- TPC-H Q11: important stock identification.
-- Validation parameters: NATION = GERMANY, FRACTION = 0.0001 / SF (substituted by queries.py).
select
    ps_partkey,
    sum(ps_supplycost * ps_availqty) as value
from
    partsupp,
    supplier,
    nation
where
    ps_suppkey = s_suppkey
    and s_nationkey = n_nationkey
    and n_name = '{NATION}'
group by
    ps_partkey
having
    sum(ps_supplycost * ps_availqty) > (
        select
            sum(ps_supplycost * ps_availqty) * {q11_fraction}
        from
            partsupp,
            supplier,
            nation
        where
            ps_suppkey = s_suppkey
            and s_nationkey = n_nationkey
            and n_name = '{NATION}'
    )
order by
    value desc
