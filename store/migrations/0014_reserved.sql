-- Reserved: the number of a schema change being made beside this one; it replaces this file when both meet.
SELECT 1;
