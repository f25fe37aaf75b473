-- A catch-up's rows go from its cursor to its tables inside PostgreSQL (issue 20): each write of a
-- streamed step is `INSERT … SELECT * FROM upshift_fetch('cursor', n) AS r(column type, …)`, which reads
-- the next n rows of a cursor declared WITH HOLD by an earlier transaction. (They went through the server
-- before, as binary arrays bound to `unnest`: twice the cost per row, half of it in the server.)
CREATE FUNCTION upshift_fetch(cursor_name refcursor, row_limit bigint) RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
    fetched record;
    returned bigint := 0;
BEGIN
    WHILE returned < row_limit LOOP
        FETCH cursor_name INTO fetched;
        EXIT WHEN NOT FOUND;
        RETURN NEXT fetched;
        returned := returned + 1;
    END LOOP;
END
$$;
