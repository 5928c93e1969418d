"""``mysql_saver``'s store in a reproduction script: a ``PyMySQLSaver`` on a new database of the
MySQL/MariaDB server at 127.0.0.1:3306 (user root), dropped when the script exits."""

import atexit
import uuid

import pymysql
from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

from adapters.storeprotocol import ScriptStore


def fresh_database():
    name = f"repro_{uuid.uuid4().hex}"  # the script's own, whatever else runs
    admin = pymysql.connect(host="127.0.0.1", user="root", autocommit=True)
    admin.cursor().execute(f"CREATE DATABASE `{name}`")
    atexit.register(lambda: admin.cursor().execute(f"DROP DATABASE `{name}`"))
    return name


def mysql_saver(cls=PyMySQLSaver):
    """As ``PyMySQLSaver.from_conn_string`` connects (autocommit); ``setup`` creates the tables
    the first time."""
    saver = cls(pymysql.connect(host="127.0.0.1", user="root", database=DATABASE, autocommit=True))
    saver.setup()
    return saver


SCRIPT = ScriptStore(functions=(fresh_database, mysql_saver), build="mysql_saver",
                     setup=("DATABASE = fresh_database()",),
                     distributions=("langgraph-checkpoint-mysql", "pymysql"))
