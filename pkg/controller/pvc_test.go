package controller

import ()
